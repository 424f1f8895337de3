-- The model's words that came with a batch's calls, shown on its card, kept
-- with the batch so a card is rendered without loading and decoding the
-- whole assistant message. NULL for batches stored before this migration:
-- their cards read the words from the message, as before.
ALTER TABLE batches ADD COLUMN intro TEXT;
