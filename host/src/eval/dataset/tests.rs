//! Datasets as people write them: our own shape, a byte order mark, and
//! the shapes of GSM8K and MMLU.

use super::*;

#[test]
fn lines_parse_with_defaults_and_errors_name_the_line() {
    let items = parse(
        "# capitals\n{\"question\": \"Capital of France?\", \"expected\": \"Paris\"}\n\n\
         {\"id\": \"pi\", \"question\": \"Pi to 2 places?\", \"expected\": \"3.14\", \"grader\": \"numeric\", \"tolerance\": 0.005}\n",
    )
    .unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].id, "line-2");
    assert_eq!(items[0].grader, Grader::Contains);
    assert_eq!(items[1].grader, Grader::Numeric);

    let error = parse("{\"question\": \"q\"}").unwrap_err();
    assert!(
        error.starts_with("1: missing field `expected` (or its alias `answer`)"),
        "{error}"
    );
    let error =
        parse("{\"question\": \"q\", \"expected\": \"x\", \"grader\": \"fuzzy\"}").unwrap_err();
    assert!(error.contains("unknown variant `fuzzy`"), "{error}");
    let error =
        parse("{\"question\": \"q\", \"expected\": \"(\", \"grader\": \"regex\"}").unwrap_err();
    assert!(error.contains("not a regular expression"), "{error}");
    let error = parse(
        "{\"id\": \"a\", \"question\": \"q\", \"expected\": \"x\"}\n{\"id\": \"a\", \"question\": \"q\", \"expected\": \"x\"}",
    )
    .unwrap_err();
    assert!(error.starts_with("2: the id `a` is used twice"), "{error}");
    let error = parse("{\"question\": \"q\", \"expected\": \"x\", \"answer\": \"x\"}").unwrap_err();
    assert!(error.contains("both `expected` and `answer`"), "{error}");
    assert!(parse("\n# nothing\n").is_err());
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let items = parse("\u{feff}{\"question\": \"q\", \"expected\": \"x\"}\n").unwrap();
    assert_eq!(items[0].expected, "x");
}

#[test]
fn a_regex_is_compiled_once_when_the_dataset_is_read() {
    let items =
        parse("{\"question\": \"q\", \"expected\": \"^a+$\", \"grader\": \"regex\"}").unwrap();
    assert!(items[0].pattern.as_ref().unwrap().is_match("aaa"));
}

#[test]
fn gsm8k_answers_are_graded_by_their_final_number() {
    let items = parse(
        "{\"question\": \"Natalia sold 48 clips…\", \"answer\": \"She sold 48/2 = 24 in May.\\n#### 72\"}\n\
         {\"question\": \"Two plus two?\", \"answer\": 4}",
    )
    .unwrap();
    assert_eq!(items[0].expected, "72");
    assert_eq!(items[0].grader, Grader::Numeric);
    assert_eq!(items[1].expected, "4");
    assert_eq!(items[1].grader, Grader::Contains);
}

#[test]
fn mmlu_items_are_asked_with_their_choices_and_graded_by_letter() {
    let items = parse(
        "{\"question\": \"Capital of France?\", \"choices\": [\"Lyon\", \"Paris\", \"Nice\"], \"answer\": 1}\n\
         {\"question\": \"Largest?\", \"choices\": [\"1\", \"3\"], \"expected\": \"B\"}",
    )
    .unwrap();
    assert_eq!(items[0].grader, Grader::Choice);
    assert_eq!(items[0].expected, "B");
    assert!(
        items[0].question.ends_with("A) Lyon\nB) Paris\nC) Nice"),
        "{}",
        items[0].question
    );
    let grade = |item: &Item, answer: &str| {
        futures::executor::block_on(item.grader.grade(&item.reference(), answer, None)).pass
    };
    assert!(grade(&items[0], "The answer is B"));
    assert!(grade(&items[0], "(B) Paris"));
    assert!(!grade(&items[0], "C"));
    assert_eq!(items[1].expected, "B");

    let error =
        parse("{\"question\": \"q\", \"choices\": [\"a\", \"b\"], \"answer\": 5}").unwrap_err();
    assert!(error.contains("not one of the 2 choices"), "{error}");
    let error =
        parse("{\"question\": \"q\", \"expected\": \"x\", \"grader\": \"choice\"}").unwrap_err();
    assert!(error.contains("needs `choices`"), "{error}");
}
