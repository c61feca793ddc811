//! `chorus eval` items with attachments for `model:ID` targets: a model
//! that sees images gets the image itself; a text-only one gets the
//! description a model that sees them wrote, as a pipeline's default.

use crate::attachments::sent::{
    BLIND, EYE, GIF, SEES, catalog, config, eval_json, image_parts, last_user, script,
};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_model_target_takes_an_items_attachments() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let file = write_config(&config(&mock, "", ""));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shape.gif"), GIF).unwrap();
    let dataset = dir.path().join("shapes.jsonl");
    std::fs::write(
        &dataset,
        r#"{"id": "shape", "question": "What shape?", "expected": "square", "grader": "regex", "attachments": ["shape.gif"]}
"#,
    )
    .unwrap();
    let targets = format!("model:{SEES},model:{BLIND}");
    let report = eval_json(&dataset, &file.path, &targets).await;
    for outcome in report["outcomes"].as_array().unwrap() {
        assert_eq!(outcome["grade"]["pass"], true, "{report:#}");
    }

    // The model that sees images got the image...
    let sees = mock.requests_for(SEES);
    assert_eq!(sees.len(), 1);
    assert_eq!(image_parts(last_user(&sees[0].body)).len(), 1);
    // ...the text-only one the description, written once by the cheapest
    // model that sees it.
    let eye = mock.requests_for(EYE);
    assert_eq!(eye.len(), 1, "{report:#}");
    assert_eq!(image_parts(last_user(&eye[0].body)).len(), 1);
    let blind = mock.requests_for(BLIND);
    let said = last_user(&blind[0].body).as_str().unwrap();
    assert!(
        said.starts_with("What shape?")
            && said.contains(&format!("this description by {EYE} stands in for it")),
        "{said}"
    );
}
