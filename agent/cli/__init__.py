"""The `debugger` command line."""
