"""rmqstore benchmarks: `python -m bench [--quick]` (or `make bench [QUICK=1]`).

Every figure is a ratio to a baseline measured in the same run on the same bytes (raw mmap
write, raw page-cache read through mmap, memcpy), because the machine is shared and noisy and
absolute times drift. A benchmark, not a test: nothing here asserts a time."""
