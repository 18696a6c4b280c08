//! The committed OpenAPI document (`openapi/openapi.json`) matches what the code
//! generates; `UPDATE_OPENAPI=1 cargo test openapi` rewrites it. And the document keeps
//! the project's conventions: every operation tagged, `verb_resource` ids, problem+json
//! for any 4XX/5XX.

use std::path::Path;

#[test]
fn openapi_document_has_not_drifted() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json");
    let generated = qbets::http::openapi_json();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json differs from the generated document; \
         run `UPDATE_OPENAPI=1 cargo test openapi` and commit the result"
    );
}

#[test]
fn every_operation_follows_the_conventions() {
    let doc: serde_json::Value = serde_json::from_str(qbets::http::openapi_json()).unwrap();
    let verbs = ["get", "put", "post", "delete", "patch"];
    let mut seen = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for verb in verbs {
            let Some(op) = item.get(verb) else { continue };
            seen += 1;
            let id = op["operationId"].as_str().unwrap();
            assert!(
                id.starts_with(&format!("{verb}_")) || (verb == "get" && id.starts_with("list_")),
                "{verb} {path}: operation id {id} is not verb_resource"
            );
            assert!(
                op["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{path}"
            );
            for range in ["4XX", "5XX"] {
                let content = &op["responses"][range]["content"]["application/problem+json"];
                assert!(content.is_object(), "{verb} {path} lacks {range}");
            }
        }
    }
    assert!(seen >= 9, "only {seen} operations");
}
