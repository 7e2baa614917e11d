"""Exit codes of every command (bench, check-kernel, new-kernel)."""
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
