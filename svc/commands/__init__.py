"""One module per command group; each command is ``(args, out) -> exit code``."""
