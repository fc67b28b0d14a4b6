"""The wizard's step views: one panel per step in `advisor.wizard.steps`, module by module.

A panel builds its widgets from its step's state, sends what the user types and clicks to the
step, and reads results back in `show()`. Controller notifications may arrive from the worker
thread: `show()` only sets widget traits. Every step container and main button carries a stable
CSS class (`la-step-*`, `la-btn-*`) for tests and styling (advisor/wizard/style.css).
"""
