"""Agent memory (issue 13): memories an agent writes (`memories`), knowledge updates (`updates`),
and the library functions the MCP tools and `mem remember` share (`tools`)."""
