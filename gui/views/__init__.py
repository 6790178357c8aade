"""Widgets of the browser. Views show models and ask the session for work; they never
compute store facts themselves."""
