"""The model of a seqline pipeline: blocks with seq, ordering, specs, artifacts, errors."""
