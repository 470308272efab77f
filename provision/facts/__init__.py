"""Facts: the commands that gather them (``gather``) and pure parsers, text in, typed facts out."""
