"""evidence layer: parsers and a classifier for logs and node command output."""

from llm_oncall.evidence.classify import classify_all, classify_file, classify_text, parsers, register, unregister
from llm_oncall.evidence.model import Finding

__all__ = ["Finding", "classify_all", "classify_file", "classify_text", "parsers", "register", "unregister"]
