"""The developer console: server-rendered pages on the console host (spec 5.2, 5.3, 2.6).

Pages call the domain services of ``payments.developer``; the rules live there.
"""
