-- A record kept aside is kept once per site, source, line and text. The old key (site,
-- source, line) lost a bad line of one PBS daily file when another day's file had a
-- bad line at the same number (line numbers restart each day; the text names the
-- file), and kept nothing unique for records without a line (a slurmrestd or sacct
-- poll repeated after a restart, a retried push), which were then kept twice.
DROP INDEX IF EXISTS rejects_source_line;
DELETE FROM rejects a USING rejects b
 WHERE a.site_id = b.site_id AND a.source = b.source
   AND a.line IS NOT DISTINCT FROM b.line AND a.raw = b.raw AND a.id > b.id;
CREATE UNIQUE INDEX rejects_once ON rejects (site_id, source, COALESCE(line, -1), md5(raw));
