"""ipywidgets views of the Aries agent and the REPL body."""
