"""One module per ``ctxsim`` command: its parser (``add_parser``) and its logic (``cmd_NAME``), with what
several commands share in ``common``. ``sim.cli`` builds the parser from them and dispatches."""
