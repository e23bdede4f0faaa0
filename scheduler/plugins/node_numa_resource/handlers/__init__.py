"""NodeNUMAResource's informer handlers: one module per watched kind, each feeding the NUMA store."""
