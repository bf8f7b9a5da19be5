"""HTML of the signed-out pages: sign-up, email verification, log-in."""

from __future__ import annotations

from urllib.parse import quote

from starlette.responses import HTMLResponse

from payments.developer.accounts import CODE_LIFETIME, RESEND_COOLDOWN
from payments.errors import ApiError
from portal.console.layout import alert, attr, csrf_field, error_headers, notice, page


def _status(error: ApiError | None) -> int:
    return error.status if error else 200


def signup_page(csrf: str, email: str = "", username: str = "",
                error: ApiError | None = None) -> HTMLResponse:
    return page("Sign up", (
        "<h1>Create a developer account</h1>"
        f"{alert(error)}"
        "<form class=\"stack\" method=\"post\" action=\"/signup\">"
        f"{csrf_field(csrf)}"
        "<label for=\"email\">Email</label>"
        f"<input id=\"email\" name=\"email\" type=\"email\" autocomplete=\"email\" required "
        f"value=\"{attr(email)}\">"
        "<label for=\"username\">Username</label>"
        f"<input id=\"username\" name=\"username\" type=\"text\" autocomplete=\"username\" "
        f"required aria-describedby=\"username-hint\" value=\"{attr(username)}\">"
        "<span id=\"username-hint\" class=\"hint\">3-40 characters: lower-case letters, "
        "digits, '-' and '_'.</span>"
        "<label for=\"password\">Password</label>"
        "<input id=\"password\" name=\"password\" type=\"password\" "
        "autocomplete=\"new-password\" required aria-describedby=\"password-hint\">"
        "<span id=\"password-hint\" class=\"hint\">At least 10 characters.</span>"
        "<button type=\"submit\">Create account</button></form>"
        "<p>We email you a 6-digit code to confirm the address. "
        "Already registered? <a href=\"/login\">Log in</a>.</p>"),
        status=_status(error), headers=error_headers(error))


def verify_page(csrf: str, email: str, *, sent: bool = False, error: ApiError | None = None,
                resend_error: ApiError | None = None) -> HTMLResponse:
    cooldown = int(RESEND_COOLDOWN.total_seconds())
    minutes = int(CODE_LIFETIME.total_seconds() // 60)
    sent_notice = notice(f"We sent a 6-digit code to {email}. It is valid for {minutes} "
                         f"minutes; you can ask for a new one after {cooldown} seconds."
                         ) if sent and email else ""
    shown = error or resend_error
    return page("Verify your email", (
        "<h1>Verify your email address</h1>"
        f"{sent_notice}{alert(error)}"
        "<form class=\"stack\" method=\"post\" action=\"/verify\">"
        f"{csrf_field(csrf)}"
        "<label for=\"email\">Email</label>"
        f"<input id=\"email\" name=\"email\" type=\"email\" autocomplete=\"email\" required "
        f"value=\"{attr(email)}\">"
        "<label for=\"code\">Verification code</label>"
        "<input id=\"code\" name=\"code\" type=\"text\" inputmode=\"numeric\" "
        "autocomplete=\"one-time-code\" required maxlength=\"6\" "
        "aria-describedby=\"code-hint\">"
        "<span id=\"code-hint\" class=\"hint\">The 6 digits from the email.</span>"
        "<button type=\"submit\">Verify and sign in</button></form>"
        "<h2>No email?</h2>"
        f"{alert(resend_error)}"
        "<form class=\"stack\" method=\"post\" action=\"/verify/resend\">"
        f"{csrf_field(csrf)}<input type=\"hidden\" name=\"email\" value=\"{attr(email)}\">"
        f"<span class=\"hint\">A new code can be sent once every {cooldown} seconds.</span>"
        "<button class=\"secondary\" type=\"submit\">Send a new code</button></form>"),
        status=_status(shown), headers=error_headers(shown))


def login_page(csrf: str, login: str = "", next_path: str = "", *, signed_out: bool = False,
               error: ApiError | None = None) -> HTMLResponse:
    verify_link = ""
    if error is not None and error.code == "email_not_verified":
        email = str(error.extra.get("email", ""))
        verify_link = (f"<p><a href=\"/verify?email={attr(quote(email))}\">Enter your "
                       "verification code</a></p>")
    return page("Log in", (
        "<h1>Log in to the developer console</h1>"
        f"{notice('You are logged out.' if signed_out else None)}{alert(error)}{verify_link}"
        "<form class=\"stack\" method=\"post\" action=\"/login\">"
        f"{csrf_field(csrf)}<input type=\"hidden\" name=\"next\" value=\"{attr(next_path)}\">"
        "<label for=\"login\">Email or username</label>"
        f"<input id=\"login\" name=\"login\" type=\"text\" autocomplete=\"username\" required "
        f"value=\"{attr(login)}\">"
        "<label for=\"password\">Password</label>"
        "<input id=\"password\" name=\"password\" type=\"password\" "
        "autocomplete=\"current-password\" required>"
        "<button type=\"submit\">Log in</button></form>"
        "<p>New here? <a href=\"/signup\">Create an account</a>.</p>"),
        status=_status(error), headers=error_headers(error))
