-- The calls a gateway request may bind to (BindableBatch): pending, or
-- allowed by people or a grant and not yet started. Only those, so that
-- binding reads them alone, however many decided calls a session holds.
CREATE INDEX calls_bindable ON calls (tool) WHERE decision = 'pending' OR decision IN ('allowed', 'allowed_by_grant') AND run_status = 'not_started';
