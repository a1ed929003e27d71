"""The cluster runtime: a controller and worker processes that exchange framed msgpack over TCP."""
