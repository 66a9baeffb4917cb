"""What a single line says about itself: the wrapper prefixes that name its rank, local rank and node,
and its timestamp."""

# A line break that the file holds escaped inside one of its lines (a JSON-lines log's `"exc_info": "Traceback
# ...\n..."`, read with its escapes decoded in place: tools/bundle/notebook.py), shown as this character so that the
# file's lines stay its lines and a reader can still split that one line into the lines it holds
# (tools/sources/generic.py final_exception).
LINE_BREAK = "\u21b5"  # ↵
