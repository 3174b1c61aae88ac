"""The `mem` command line: parse, call one library function, render."""
