"""The run viewer in a real browser: Debian's chromium driven by Playwright.

Started by tests/e2e/web/viewer.rs with one JSON argument (the server's origin
and token, the ids of a finished run and of a run held in flight, the
hostile answer one member gave, where chromium and axe-core are). Prints
`open-gate` when the test should let the slow run finish, and `ok` last
when every check passed; any failed check raises (exit status 1).

One browser, three contexts: the user's (signed in through the form; every
request it makes is logged and must stay on 127.0.0.1), another site's
page (its POST must be refused), and one for axe-core (Bearer header, CSP
bypassed only so that axe's script can be injected).
"""

import json
import re
import sys

from playwright.sync_api import sync_playwright

args = json.loads(sys.argv[1])
origin = args["origin"]
token = args["token"]
run = args["run"]
slow = args["slow"]


def say(line):
    print(line, flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path=args["chromium"],
        args=["--no-sandbox", "--disable-gpu"],
    )
    user = browser.new_context()
    requests, dialogs, errors = [], [], []
    user.on("request", lambda r: requests.append(r.url))
    page = user.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )

    # A wrong token signs nobody in; the runs stay behind the sign-in page.
    response = page.goto(f"{origin}/sign-in?token=wrong-token")
    check(response.status == 401, f"a wrong token got {response.status}")
    page.goto(f"{origin}/")
    check(page.url.endswith("/sign-in"), f"not sent to sign in: {page.url}")

    # Sign in with the token, through the form.
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{origin}/")
    rows = page.locator("table.runs tbody tr")
    check(rows.count() >= 2, f"the runs list has {rows.count()} rows")
    listed = page.locator("table.runs").inner_text()
    check("What is the capital of France?" in listed, listed)
    check("A SLOW question" in listed, listed)
    # A run is in flight: the list follows it live.
    check(page.locator("#runs[data-live='/events']").count() == 1, "the list is not live")
    check(page.locator("table.runs .badge.running").count() == 1, "the slow run is not marked running")

    # A run in flight fills in without a reload.
    errors.clear()
    page.goto(f"{origin}/runs/{slow}")
    check(page.locator(".badge.running").count() >= 1, "the slow run is not shown running")
    check(page.locator("#final-answer").count() == 0, "the slow run has an answer already")
    page.evaluate("window.stayedOnPage = true")
    say("open-gate")
    page.wait_for_selector("#final-answer", timeout=30_000)
    check(page.evaluate("window.stayedOnPage === true"), "the page was reloaded")
    check("Live answer arrived." in page.inner_text("#final-answer"), page.inner_text("#run"))
    members_live = page.locator(".member").count()
    check(members_live == 5, f"{members_live} members after the live update")

    # The finished run: every member, the failed one's reason, the timeline.
    errors.clear()
    page.goto(f"{origin}/runs/{run}")
    members = page.locator("section.member")
    check(members.count() == 5, f"{members.count()} members shown")
    text = page.inner_text("#run")
    headings = page.locator("section.member h3").all_inner_texts()
    for model in ["m1", "m2", "m3", "m4", "m5"]:
        check(page.locator(f"section.member[data-model='{model}']").count() == 1, f"no {model}: {headings}")
    check("Paris** is" not in text and page.locator("section.member strong").count() >= 1,
          "markdown was not rendered")
    reason = page.inner_text("section.member[data-model='m3'] .reason")
    check("400" in reason and "not available" in reason, f"m3's reason: {reason}")
    check(page.locator("svg.timeline rect.bar").count() == 6, "the timeline lacks calls")
    check("The capital is Paris." in page.inner_text("#final-answer"), "the final answer")

    # The hostile answer is text: shown, nothing made of it, nothing run.
    hostile_member = page.inner_text("section.member[data-model='m2']")
    check(args["hostile"] in hostile_member, f"the hostile answer is not shown as text: {hostile_member}")
    check(page.locator("#run img").count() == 0, "an <img> was made from an answer")
    check(page.locator("#run script").count() == 0, "a <script> was made from an answer")
    page.wait_for_timeout(300)
    check(not dialogs, f"dialogs opened: {dialogs}")
    check(not errors, f"errors on the page: {errors}")

    # Re-synthesize: a new run, which links its source; the source links it.
    page.select_option("#merger", "as-before")
    page.click("form[action$='/resynthesize'] button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}$"))
    new_run = page.url.rsplit("/", 1)[1]
    check(new_run != run, "no new run")
    check(page.locator(f"a[href='/runs/{run}']").count() >= 1, "the new run does not link its source")
    page.wait_for_selector("#final-answer", timeout=30_000)
    check("Merged again: Paris." in page.inner_text("#final-answer"), page.inner_text("#run"))
    page.goto(f"{origin}/runs/{run}")
    check(page.locator(f"a[href='/runs/{new_run}']").count() == 1, "the source does not link its re-synthesis")
    check(not dialogs and not errors, f"dialogs {dialogs}, errors {errors}")

    # The pictures in the README, when asked for (CHORUS_SCREENSHOTS=DIR).
    if args.get("screenshots"):
        shots = args["screenshots"]
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{origin}/runs/{run}")
        page.screenshot(path=f"{shots}/viewer-run.png", full_page=True)
        page.goto(f"{origin}/")
        page.screenshot(path=f"{shots}/viewer-runs.png")
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{origin}/runs/{run}")
        page.locator(".member-tabs").scroll_into_view_if_needed()
        page.screenshot(path=f"{shots}/viewer-run-phone.png")

    # Nothing the user's browser asked for left this server.
    strays = [url for url in requests if not url.startswith(origin + "/")]
    check(not strays, f"requests left 127.0.0.1: {strays}")

    # Another site's page posting to chorus, in a browser signed in to it.
    evil = browser.new_context()
    evil_page = evil.new_page()
    # A long-lived token in a link signs nobody in (login CSRF, proxy logs):
    # only the form takes it.
    refused_link = evil_page.goto(f"{origin}/sign-in?token={token}")
    check(refused_link.status == 401, f"a client's token in a link got {refused_link.status}")
    evil_page.goto(f"{origin}/sign-in")
    evil_page.fill("#token", token)
    evil_page.click("button[type=submit]")
    evil_page.wait_for_url(f"{origin}/")
    evil_page.route(
        "http://evil.example/**",
        lambda route: route.fulfill(
            content_type="text/html",
            body=(
                f'<form method="post" action="{origin}/runs/{run}/resynthesize">'
                '<input name="merger" value="as-before"><input name="csrf" value="guess">'
                '<button id="go">go</button></form>'
            ),
        ),
    )
    evil_page.goto("http://evil.example/")
    with evil_page.expect_response(f"{origin}/runs/{run}/resynthesize") as refused:
        evil_page.click("#go")
    check(refused.value.status == 403, f"a cross-site POST got {refused.value.status}")
    # The same POST from the page's own origin but without its CSRF token.
    forged = evil.request.post(
        f"{origin}/runs/{run}/resynthesize", form={"merger": "as-before", "csrf": "guess"}
    )
    check(forged.status == 403, f"a POST without the CSRF token got {forged.status}")
    evil.close()

    # With JavaScript off, a run still reads whole.
    plain = browser.new_context(
        java_script_enabled=False, extra_http_headers={"Authorization": f"Bearer {token}"}
    )
    plain_page = plain.new_page()
    plain_page.goto(f"{origin}/runs/{run}")
    check(plain_page.locator("section.member").count() == 5, "members without script")
    check(plain_page.locator("section.member:visible").count() == 5, "hidden members without script")
    check("The capital is Paris." in plain_page.inner_text("#final-answer"), "answer without script")
    check(plain_page.locator("svg.timeline").count() == 1, "timeline without script")
    plain.close()

    # axe-core: no serious or critical violation on the list and run pages.
    checker = browser.new_context(
        bypass_csp=True, extra_http_headers={"Authorization": f"Bearer {token}"}
    )
    axe_page = checker.new_page()
    for path in ["/", f"/runs/{run}", "/sign-in"]:
        axe_page.goto(f"{origin}{path}")
        axe_page.add_script_tag(path=args["axe"])
        result = axe_page.evaluate("axe.run()")
        bad = [
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        check(not bad, f"axe on {path}: {bad}")
    checker.close()
    browser.close()

say("ok")
