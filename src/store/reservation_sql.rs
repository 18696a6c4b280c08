//! The reservation methods of both backends, written once (`$1…$n` placeholders, which
//! SQLite also reads). Only claiming differs: PostgreSQL skips rows another replica has
//! locked (`FOR UPDATE SKIP LOCKED`); SQLite has one writer at a time anyway.
//! Expects `self.pool` and the row types in scope.

/// Inserts reservation `$r` (a `&NewReservation`) with its first event in transaction
/// `$tx`, as a member of co-allocation `$coallocation` (`Option<(id, index)>`); evaluates
/// to the stored [`Reservation`] (`?` on errors).
macro_rules! insert_reservation_in {
    ($tx:expr, $r:expr, $coallocation:expr) => {{
        let r: &NewReservation = $r;
        let coallocation: Option<(i64, i64)> = $coallocation;
        let (plan, q) = (r.plan, &r.request);
        let row = sqlx::query_as::<_, ReservationRow>(concat!(
            "INSERT INTO reservations (uid, owner, site, queue, nodes, walltime_s, start_at, \
               min_probability, confidence, mode, step_s, command, run_mode, state, submit_at, \
               advertised_walltime_s, probability, at_risk, planned_at, coallocation_id, \
               coalloc_index, created_at, updated_at, idempotency_key, on_failure, webhook) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
               $18, $19, $20, $21, $19, $19, $22, $23, $24) RETURNING ",
            reservation_columns!()
        ))
        .bind(&q.uid)
        .bind(&q.owner)
        .bind(&q.site)
        .bind(&q.queue)
        .bind(q.nodes)
        .bind(q.walltime_s)
        .bind(q.start_at)
        .bind(q.min_probability)
        .bind(q.confidence)
        .bind(mode_name(q.mode))
        .bind(q.step_s)
        .bind(&q.command)
        .bind(q.run_mode.as_str())
        .bind(r.state.as_str())
        .bind(plan.map(|p| p.submit_at))
        .bind(plan.map(|p| p.advertised_walltime_s))
        .bind(plan.map(|p| p.probability))
        .bind(r.at_risk)
        .bind(r.created_at)
        .bind(coallocation.map(|c| c.0))
        .bind(coallocation.map(|c| c.1))
        .bind(&r.idempotency_key)
        .bind(q.on_failure.as_str())
        .bind(q.webhook.as_deref())
        .fetch_one(&mut *$tx)
        .await
        .map_err(db_error)?;
        let stored = Reservation::try_from(row)?;
        sqlx::query(
            "INSERT INTO reservation_events (reservation_id, at, state, reason) VALUES ($1, $2, $3, $4)",
        )
        .bind(stored.id)
        .bind(r.created_at)
        .bind(r.state.as_str())
        .bind(&r.reason)
        .execute(&mut *$tx)
        .await
        .map_err(db_error)?;
        stored
    }};
}

/// Writes a webhook outbox row for reservation `$id` (its `$target`, a [`HookTarget`])
/// moving from `$prev` to `$state` at `$at`, in transaction `$tx`, when it names a
/// webhook: in the transaction of the change itself, so every change committed is sent
/// and none that was not.
macro_rules! outbox_in {
    ($tx:expr, $id:expr, $target:expr, $state:expr, $prev:expr, $at:expr) => {{
        let target: &HookTarget = $target;
        let (state, prev, at): (&str, &str, i64) = ($state, $prev, $at);
        if let Some(url) = &target.webhook {
            let body = webhook_body(&target.uid, &target.site, &target.queue, state, prev, at);
            sqlx::query(
                "INSERT INTO webhook_outbox (reservation_id, url, state, previous_state, body, \
                   created_at, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, $6)",
            )
            .bind($id)
            .bind(url)
            .bind(state)
            .bind(prev)
            .bind(body)
            .bind(at)
            .execute(&mut *$tx)
            .await
            .map_err(db_error)?;
        }
    }};
}

macro_rules! reservation_store_methods {
    ($lock:literal) => {
    async fn insert_reservation(&self, r: &NewReservation) -> StoreResult<Reservation> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        let stored = insert_reservation_in!(tx, r, r.coallocation);
        tx.commit().await.map_err(db_error)?;
        Ok(stored)
    }

    async fn reservation(&self, uid: &str) -> StoreResult<Option<Reservation>> {
        sqlx::query_as::<_, ReservationRow>(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE uid = $1"
        ))
        .bind(uid)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(Reservation::try_from)
        .transpose()
    }

    async fn reservation_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<Reservation>> {
        sqlx::query_as::<_, ReservationRow>(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE owner = $1 AND idempotency_key = $2"
        ))
        .bind(owner)
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(Reservation::try_from)
        .transpose()
    }

    async fn reservations(
        &self,
        owner: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<Reservation>> {
        let rows = sqlx::query_as::<_, ReservationRow>(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE ($1 IS NULL OR owner = $1) AND ($2 IS NULL OR id < $2) \
              ORDER BY id DESC LIMIT $3"
        ))
        .bind(owner)
        .bind(before)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn active_reservations(&self) -> StoreResult<Vec<Reservation>> {
        let rows = sqlx::query_as::<_, ReservationRow>(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE state IN ('planned', 'submitted', 'started') ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn reservation_events(&self, id: i64) -> StoreResult<Vec<ReservationEvent>> {
        let rows = sqlx::query_as::<_, EventRow>(
            "SELECT at, state, reason FROM reservation_events WHERE reservation_id = $1 ORDER BY id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn replan_reservation(&self, id: i64, r: &Replanned) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        // Whether this re-plan puts the reservation at risk (a webhook event): read by a
        // write that changes nothing, so the row is locked (PostgreSQL) or the database
        // write-locked (SQLite) from here to the commit and the answer cannot go stale.
        let was = if r.at_risk {
            sqlx::query_as::<_, HookTarget>(
                "UPDATE reservations SET at_risk = at_risk WHERE id = $1 AND state = 'planned' \
                 RETURNING uid, site, queue, webhook, at_risk",
            )
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?
        } else {
            None
        };
        // Not while an executor holds the submission lease: it submits what it claimed.
        let done = sqlx::query(
            "UPDATE reservations SET submit_at = $2, advertised_walltime_s = $3, probability = $4, \
               at_risk = $5, planned_at = $6, updated_at = $6 \
             WHERE id = $1 AND state = 'planned' AND (lease_until IS NULL OR lease_until < $6)",
        )
        .bind(id)
        .bind(r.plan.submit_at)
        .bind(r.plan.advertised_walltime_s)
        .bind(r.plan.probability)
        .bind(r.at_risk)
        .bind(r.at)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?
        .rows_affected()
            == 1;
        if done && let Some(reason) = &r.event {
            sqlx::query(
                "INSERT INTO reservation_events (reservation_id, at, state, reason) VALUES ($1, $2, 'planned', $3)",
            )
            .bind(id)
            .bind(r.at)
            .bind(reason)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        if done && let Some(target) = was.filter(|t| !t.at_risk) {
            outbox_in!(tx, id, &target, "at_risk", "planned", r.at);
        }
        tx.commit().await.map_err(db_error)?;
        Ok(done)
    }

    async fn claim_reservations(
        &self,
        now: i64,
        owner: &str,
        lease_until: i64,
        limit: i64,
        scope: &SiteScope,
    ) -> StoreResult<Vec<Reservation>> {
        let (only, except) = scope.binds();
        // The conditions are checked again on the row being updated: under PostgreSQL's
        // READ COMMITTED a second claimer waiting on the row re-reads it, sees the lease
        // and leaves it. A lease that ran out (its holder died) may be taken over. The
        // rows are picked once, in a materialized CTE: as `id IN (subquery)` both
        // databases may run the subquery again for each row updated, and each run
        // finds the next unleased row — every due reservation was claimed at once,
        // whatever the limit.
        let rows = sqlx::query_as::<_, ReservationRow>(concat!(
            "WITH picked AS MATERIALIZED (SELECT id FROM reservations \
                 WHERE state = 'planned' AND submit_at <= $1 \
                   AND (lease_until IS NULL OR lease_until < $1) \
                   AND ($5 IS NULL OR site = $5) AND ($6 IS NULL OR site <> $6) \
                 ORDER BY submit_at, id LIMIT $4 ",
            $lock,
            ") UPDATE reservations SET lease_owner = $2, lease_until = $3, updated_at = $1 \
             WHERE id IN (SELECT id FROM picked) \
               AND state = 'planned' AND (lease_until IS NULL OR lease_until < $1) RETURNING ",
            reservation_columns!()
        ))
        .bind(now)
        .bind(owner)
        .bind(lease_until)
        .bind(limit)
        .bind(only)
        .bind(except)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut out: Vec<Reservation> = convert(rows)?;
        out.sort_by_key(|r| r.id);
        Ok(out)
    }

    async fn transition_reservation(&self, id: i64, t: &Transition) -> StoreResult<bool> {
        if !t.from.can_become(t.to) {
            return Err(StoreError::Invalid(format!(
                "a reservation cannot go from {} to {}",
                t.from, t.to
            )));
        }
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        let changed = sqlx::query_as::<_, HookTarget>(
            "UPDATE reservations SET state = $3, \
               remote_job_id = COALESCE($5, remote_job_id), \
               submitted_at = COALESCE($6, submitted_at), \
               started_at = COALESCE($7, started_at), \
               ended_at = COALESCE($8, ended_at), \
               lease_owner = NULL, lease_until = NULL, updated_at = $9 \
             WHERE id = $1 AND state = $2 AND ($4 IS NULL OR lease_owner = $4) \
             RETURNING uid, site, queue, webhook, at_risk",
        )
        .bind(id)
        .bind(t.from.as_str())
        .bind(t.to.as_str())
        .bind(t.lease_owner.as_deref())
        .bind(t.remote_job_id.as_deref())
        .bind(t.submitted_at)
        .bind(t.started_at)
        .bind(t.ended_at)
        .bind(t.at)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let done = changed.is_some();
        if let Some(target) = &changed {
            outbox_in!(tx, id, target, t.to.as_str(), t.from.as_str(), t.at);
            sqlx::query(
                "INSERT INTO reservation_events (reservation_id, at, state, reason) VALUES ($1, $2, $3, $4)",
            )
            .bind(id)
            .bind(t.at)
            .bind(t.to.as_str())
            .bind(&t.reason)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(done)
    }

    async fn set_remote_cleanup(&self, id: i64, pending: bool) -> StoreResult<()> {
        sqlx::query("UPDATE reservations SET remote_cleanup = $2 WHERE id = $1")
            .bind(id)
            .bind(pending)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn remote_cleanups(&self) -> StoreResult<Vec<Reservation>> {
        let rows = sqlx::query_as::<_, ReservationRow>(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE remote_cleanup ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn note_reservation(&self, id: i64, at: i64, reason: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO reservation_events (reservation_id, at, state, reason) \
             SELECT id, $2, state, $3 FROM reservations WHERE id = $1",
        )
        .bind(id)
        .bind(at)
        .bind(reason)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn mark_submit_attempt(&self, id: i64, at: i64) -> StoreResult<()> {
        sqlx::query("UPDATE reservations SET submit_attempted_at = $2 WHERE id = $1")
            .bind(id)
            .bind(at)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn release_lease(&self, id: i64, owner: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE reservations SET lease_owner = NULL, lease_until = NULL \
             WHERE id = $1 AND lease_owner = $2",
        )
        .bind(id)
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn calibration(&self) -> StoreResult<Vec<Calibration>> {
        let rows = sqlx::query_as::<_, CalibrationRow>(
            "SELECT site, queue, COUNT(*) AS finished, \
               SUM(CASE WHEN state = 'succeeded' THEN 1 ELSE 0 END) AS succeeded, \
               AVG(probability) AS mean_probability \
             FROM reservations WHERE state IN ('succeeded', 'failed') \
               AND submitted_at IS NOT NULL \
             GROUP BY site, queue ORDER BY site, queue",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(Calibration::from).collect())
    }

    async fn insert_coallocation(
        &self,
        c: &NewCoallocation,
        members: &[NewReservation],
    ) -> StoreResult<Coallocation> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        let stored: Coallocation = sqlx::query_as::<_, CoallocationRow>(concat!(
            "INSERT INTO coallocations (uid, owner, p_all, p_indep, p_expected, count, created_at, \
               idempotency_key, request_digest) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ",
            coallocation_columns!()
        ))
        .bind(&c.uid)
        .bind(&c.owner)
        .bind(c.p_all)
        .bind(c.p_indep)
        .bind(c.p_expected)
        .bind(c.count)
        .bind(c.created_at)
        .bind(c.idempotency.as_ref().map(|(key, _)| key))
        .bind(c.idempotency.as_ref().map(|(_, digest)| digest))
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?
        .into();
        for m in members {
            let index = m.coallocation.map_or(0, |(_, i)| i);
            insert_reservation_in!(tx, m, Some((stored.id, index)));
        }
        tx.commit().await.map_err(db_error)?;
        Ok(stored)
    }

    async fn coallocation_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<Coallocation>> {
        Ok(sqlx::query_as::<_, CoallocationRow>(concat!(
            "SELECT ",
            coallocation_columns!(),
            " FROM coallocations WHERE owner = $1 AND idempotency_key = $2"
        ))
        .bind(owner)
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(Coallocation::from))
    }

    async fn coallocation(&self, uid: &str) -> StoreResult<Option<Coallocation>> {
        Ok(sqlx::query_as::<_, CoallocationRow>(concat!(
            "SELECT ",
            coallocation_columns!(),
            " FROM coallocations WHERE uid = $1"
        ))
        .bind(uid)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(Coallocation::from))
    }

    async fn coallocation_members(&self, id: i64) -> StoreResult<Vec<Reservation>> {
        let rows = sqlx::query_as::<_, ReservationRow>(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM reservations WHERE coallocation_id = $1 ORDER BY coalloc_index, id"
        ))
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn claim_webhooks(
        &self,
        now: i64,
        owner: &str,
        lease_until: i64,
        limit: i64,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        // A reservation's events go in order: a row waits while an earlier one of the
        // same reservation is neither delivered nor given up. A row never tried is due
        // whatever clock stamped it (the demo's runs ahead of the wall clock). Picked once, in a
        // materialized CTE, and checked again on the row updated (as claim_reservations).
        let rows = sqlx::query_as::<_, WebhookRow>(concat!(
            "WITH picked AS MATERIALIZED (SELECT o.id FROM webhook_outbox o \
                 WHERE o.delivered_at IS NULL AND o.gave_up_at IS NULL \
                   AND (o.next_attempt_at <= $1 OR o.attempts = 0) \
                   AND (o.lease_until IS NULL OR o.lease_until < $1) \
                   AND NOT EXISTS (SELECT 1 FROM webhook_outbox e \
                     WHERE e.reservation_id = o.reservation_id AND e.id < o.id \
                       AND e.delivered_at IS NULL AND e.gave_up_at IS NULL) \
                 ORDER BY o.next_attempt_at, o.id LIMIT $4 ",
            $lock,
            ") UPDATE webhook_outbox SET lease_owner = $2, lease_until = $3 \
             WHERE id IN (SELECT id FROM picked) AND delivered_at IS NULL \
               AND gave_up_at IS NULL AND (lease_until IS NULL OR lease_until < $1) RETURNING ",
            webhook_columns!()
        ))
        .bind(now)
        .bind(owner)
        .bind(lease_until)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut out: Vec<WebhookDelivery> = rows.into_iter().map(WebhookDelivery::from).collect();
        out.sort_by_key(|d| d.id);
        Ok(out)
    }

    async fn record_webhook(
        &self,
        id: i64,
        owner: &str,
        outcome: &WebhookOutcome,
    ) -> StoreResult<bool> {
        let q = match outcome {
            WebhookOutcome::Delivered { at } => sqlx::query(
                "UPDATE webhook_outbox SET attempts = attempts + 1, delivered_at = $3, \
                   last_error = NULL, lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND lease_owner = $2",
            )
            .bind(id)
            .bind(owner)
            .bind(*at),
            WebhookOutcome::Failed {
                at,
                error,
                next_attempt_at,
                give_up,
            } => sqlx::query(
                "UPDATE webhook_outbox SET attempts = attempts + 1, last_error = $3, \
                   next_attempt_at = $4, gave_up_at = $5, lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND lease_owner = $2",
            )
            .bind(id)
            .bind(owner)
            .bind(error.as_str())
            .bind(*next_attempt_at)
            .bind(give_up.then_some(*at)),
        };
        Ok(q.execute(&self.pool).await.map_err(db_error)?.rows_affected() == 1)
    }

    async fn webhook_deliveries(&self, reservation_id: i64) -> StoreResult<Vec<WebhookDelivery>> {
        let rows = sqlx::query_as::<_, WebhookRow>(concat!(
            "SELECT ",
            webhook_columns!(),
            " FROM webhook_outbox WHERE reservation_id = $1 ORDER BY id"
        ))
        .bind(reservation_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(WebhookDelivery::from).collect())
    }
    };
}
pub(super) use {insert_reservation_in, outbox_in, reservation_store_methods};
