//! A test fixture: a selector built for a contract version newer than this
//! chorus speaks (`chorus:strategy@0.7.0`), which chorus must refuse at load,
//! naming both versions. Built for the tests, never embedded in chorus.

wit_bindgen::generate!({
    inline: r#"
        package chorus:strategy@0.7.0;

        interface selector {
            select: func(prompt: string, settings: string) -> result<list<string>, string>;
        }

        world future-selector {
            export selector;
        }
    "#,
});

struct Future;

impl exports::chorus::strategy::selector::Guest for Future {
    fn select(_prompt: String, _settings: String) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

export!(Future);
