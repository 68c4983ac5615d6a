"""Prompts: user messages → exact token ids ending in the answer cue; answers read back from text."""
