"""ElasticQuota's informer handlers: one module per watched kind, each feeding the quota index or
the ledger and telling the figures writer."""
