"""``koord-descheduler``: policy plugins pick pods to move, the MigrationController moves them
safely through PodMigrationJobs (see ``docs/descheduler.md``)."""
