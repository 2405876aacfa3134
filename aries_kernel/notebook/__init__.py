"""The notebook a kernel serves: which file, its cells, the session's state as the agent's context, replay."""
