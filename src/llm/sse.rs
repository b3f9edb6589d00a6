//! Server-sent events, as far as chat-completion streams use them: `data:` lines,
//! events separated by a blank line, comments ignored. Small enough that a
//! dependency would cost more than it saves.

/// Splits a byte stream into the data of each event.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    data: String,
}

/// Longest line accepted; a server sending more without a newline is broken.
const MAX_LINE: usize = 16 << 20;

impl SseDecoder {
    /// Feeds bytes; returns the data of every event they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(pos) = self.buffer.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(std::mem::take(&mut self.data));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        }
        if self.buffer.len() > MAX_LINE {
            return Err("an event line is longer than 16 MiB".into());
        }
        Ok(events)
    }

    /// The data of an event left unterminated when the stream ended.
    pub fn finish(&mut self) -> Option<String> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buffer)).into_owned();
        if let Some(value) = rest.trim_end().strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(value.trim_start());
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut d = SseDecoder::default();
        assert!(d.feed(b"data: {\"a\"").unwrap().is_empty());
        assert_eq!(
            d.feed(b":1}\n\n: ping\n\ndata: [DONE]\r\n\r\n").unwrap(),
            ["{\"a\":1}", "[DONE]"]
        );
    }

    #[test]
    fn multi_line_data_and_unterminated_tail() {
        let mut d = SseDecoder::default();
        assert_eq!(d.feed(b"data: a\ndata: b\n\n").unwrap(), ["a\nb"]);
        assert!(d.feed(b"data: tail").unwrap().is_empty());
        assert_eq!(d.finish().as_deref(), Some("tail"));
    }
}
