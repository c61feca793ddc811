//! Model answers as HTML: markdown rendered, then sanitized. An answer is
//! untrusted text, so raw HTML in it is shown as text (never passed
//! through), images become nothing (no request leaves for a URL a model
//! wrote), and `ammonia` cleans what the renderer made.

use std::collections::HashSet;
use std::sync::LazyLock;

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

static CLEANER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .rm_tags(HashSet::from(["img"]))
        // Absolute http(s) links only: a relative one (`/sign-in?token=…`)
        // would act on this server as the reader, from a model's words.
        .url_schemes(HashSet::from(["http", "https"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"));
    builder
});

/// `text` (markdown) as sanitized HTML.
pub fn render(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut in_image = false;
    let events = Parser::new_ext(text, options).filter_map(|event| match event {
        // Raw HTML is text the model wrote: shown, not interpreted.
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        // An image's alt text stays; the picture is not fetched.
        Event::Start(Tag::Image { .. }) => {
            in_image = true;
            None
        }
        Event::End(TagEnd::Image) => {
            in_image = false;
            None
        }
        Event::Text(alt) if in_image => Some(Event::Text(CowStr::from(format!("[{alt}]")))),
        other => Some(other),
    });
    let mut unsafe_html = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut unsafe_html, events);
    CLEANER.clean(&unsafe_html).to_string()
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn only_absolute_web_links_survive() {
        let html = render(
            "[a](/sign-in?token=x) [b](runs/1) [c](//evil.example/x) [d](mailto:x@y) [e](https://example.com/)",
        );
        assert!(
            !html.contains("sign-in") && !html.contains("runs/1"),
            "{html}"
        );
        assert!(
            !html.contains("evil.example") && !html.contains("mailto"),
            "{html}"
        );
        assert!(html.contains("href=\"https://example.com/\""), "{html}");
    }

    #[test]
    fn markdown_is_rendered() {
        let html = render("# Title\n\n- **bold** item\n\n`code`");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
    }

    #[test]
    fn html_in_an_answer_is_shown_as_text_and_runs_nothing() {
        for hostile in [
            "<img src=x onerror=alert(1)>",
            "<script>alert(1)</script>",
            "a <b onclick=alert(1)>b</b>",
        ] {
            let html = render(hostile);
            assert!(!html.contains("<img"), "{html}");
            assert!(!html.contains("<script"), "{html}");
            assert!(!html.contains("<b "), "{html}");
            assert!(html.contains("&lt;"), "shown as text: {html}");
        }
        let link = render("[x](javascript:alert(1)) ![pic](http://evil.example/p.png)");
        assert!(!link.contains("javascript:"), "{link}");
        assert!(!link.contains("evil.example"), "{link}");
        assert!(link.contains("[pic]"), "{link}");
    }
}
