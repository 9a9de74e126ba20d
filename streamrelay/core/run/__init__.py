"""The run: the registry between ingest and delivery (relay), one run's inbox and worker, the pure run stage
(stage: events in, the chat state it should show out), its controller (the stage wired to its conversations'
delivery), Stop, sub-agents, the live monitor, and what is kept of finished runs."""
