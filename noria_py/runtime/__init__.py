"""Runtimes move messages between domain shards; they do not know what operators do."""
