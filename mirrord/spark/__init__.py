"""The Spark side: the session and its JVM, the streaming query, its trigger mode, where it resumes."""
