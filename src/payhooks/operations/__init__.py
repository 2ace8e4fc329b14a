"""Operations: the delivery log, health, alarms and alerts, the notifier, the timeline, retention
and metrics."""
