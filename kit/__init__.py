"""kvexact release qualification kit: runs an engine release's own code on the project's case
inputs, writes vector files in the project's formats, diffs them against the nearest known
release and drafts a catalog entry. See kit/README.md."""
