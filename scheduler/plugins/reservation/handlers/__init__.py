"""Reservation's informer handlers: one module per watched kind, each feeding the reservation store."""
