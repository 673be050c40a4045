"""`python -m llm_oncall.cli`."""

from llm_oncall.cli import main

main()
