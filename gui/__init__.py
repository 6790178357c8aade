"""rmqstore browser (PySide6 + pyqtgraph). All store access goes through engine.MessageStore."""
