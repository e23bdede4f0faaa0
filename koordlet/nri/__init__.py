"""koordlet's NRI plugin (docs/koordlet.md#nri): ttrpc framing, NRI's connection mux, the plugin
service and the connection that keeps it registered with the runtime."""
