"""Models behind the browser's views. block_cache, queue_rows, filters and overview are pure
Python (no Qt) and tested alone; the Qt models wrap them."""
