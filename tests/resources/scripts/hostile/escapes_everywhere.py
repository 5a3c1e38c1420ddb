"""Prints and raises what no file a person opens may pass on: a window title, a screen clear, an OSC 52
clipboard write, text hidden by colour, a NUL, a mention, an HTML comment opener and a script tag."""

HOSTILE = (
    "\x1b]0;pwned title\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x1b[8mhidden\x1b[0m\x00 "
    "cc @maintainer <!-- hide the rest <script>alert(1)</script>"
)
print(HOSTILE, flush=True)
raise RuntimeError(HOSTILE)
