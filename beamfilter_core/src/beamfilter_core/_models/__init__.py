"""Chat model implementations behind the :class:`ChatModel` protocol."""
