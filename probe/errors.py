"""The one exception type for bad input; the entry point turns it into a clean non-zero exit."""


class ProbeInputError(Exception):
    """Invalid user input: a data file, a config value, a tokenizer that cannot score letters.

    Messages name the file (or model), the row and the field, with what was expected and
    what was found, so the user can fix the input without reading a traceback.
    """
