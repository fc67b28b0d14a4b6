"""The wizard's steps as state and actions, with no widgets (the controller runs them headless).

One module per step: what the user typed there, the actions that run the engine, and which other
steps' results an action makes stale. Their views are in `advisor.wizard.panels`, module by module.
"""
