"""`advisor.watch` inside the training frameworks' own loops, as their callbacks:

    from advisor.integrations.lightning import WatchCallback      # Lightning
    from advisor.integrations.huggingface import WatchCallback    # Hugging Face Trainer

Each module imports its framework; nothing else imports them, so without the framework nothing
is imported. A callback times the wait before each training batch (from the end of the last
step to the start of this one: the loader's fetch, and the framework's own work between) and
the step, and reports as `advisor.watch` does at the end of each epoch.
"""
