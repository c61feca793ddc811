"""The run viewer on a team's server, in a real browser (Debian's chromium
driven by Playwright): a client that is not an admin signs in through the
form with its own token and sees its own run but not another client's (whose
page is a 404); an admin, in a browser of its own, sees both.

Started by tests/e2e/viewer/team.rs with one JSON argument (the server's
origin, where chromium is, bob's and the admin's tokens, the ids of alice's
and bob's runs). Prints `ok` last when every check passed; any failed check
raises (exit status 1).
"""

import json
import sys

from playwright.sync_api import sync_playwright

args = json.loads(sys.argv[1])
origin = args["origin"]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def signed_in(browser, token):
    """A page in a fresh browser context, signed in with `token` through the form."""
    page = browser.new_context().new_page()
    page.goto(f"{origin}/")
    check(page.url.endswith("/sign-in"), f"not sent to sign in: {page.url}")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{origin}/")
    return page


with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path=args["chromium"],
        args=["--no-sandbox", "--disable-gpu"],
    )

    bob = signed_in(browser, args["bob"])
    listed = bob.locator("table.runs").inner_text()
    check("bravo bananas" in listed, listed)
    check("alpha apples" not in listed, f"bob sees alice's run: {listed}")
    check("bob" in bob.locator("#whose").inner_text(), "the list does not say whose runs it shows")
    response = bob.goto(f"{origin}/runs/{args['alices_run']}")
    check(response.status == 404, f"alice's run gave bob {response.status}")
    check("No such run" in bob.content(), bob.content())
    response = bob.goto(f"{origin}/runs/{args['bobs_run']}")
    check(response.status == 200, f"bob's own run gave {response.status}")
    check("bravo bananas" in bob.locator(".prompt").inner_text(), "bob's run page lacks his question")

    root = signed_in(browser, args["root"])
    listed = root.locator("table.runs").inner_text()
    check("bravo bananas" in listed and "alpha apples" in listed, listed)
    response = root.goto(f"{origin}/runs/{args['alices_run']}")
    check(response.status == 200, f"alice's run gave the admin {response.status}")

    browser.close()
    print("ok", flush=True)
