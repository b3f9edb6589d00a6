//! A user's prompt as blocks (text, resource links, embedded resources, images) and
//! the forms the model reads it in: one text (resources inlined, links and images
//! named), or, for a model that reads images, parts with the images as images.

use crate::llm::UserPart;
use crate::store::PromptBlock;

/// One block as the model reads it in text.
fn block_text(block: &PromptBlock) -> String {
    match block {
        PromptBlock::Text { text } => text.clone(),
        PromptBlock::ResourceLink { uri, .. } => format!("[resource: {uri}]"),
        PromptBlock::Resource {
            uri,
            text: Some(text),
            ..
        } => format!("<resource uri=\"{uri}\">\n{text}\n</resource>"),
        PromptBlock::Resource { .. } => "[binary resource]".into(),
        PromptBlock::Image { mime_type, .. } => format!("[image: {mime_type}]"),
    }
}

/// The prompt as one text: the blocks' texts, a line apart.
pub fn text_of(blocks: &[PromptBlock]) -> String {
    blocks.iter().map(block_text).collect::<Vec<_>>().join("\n")
}

/// The prompt as parts for a model that reads images: each image as an image, the
/// text between them as text (the same text [`text_of`] gives), in order.
pub fn parts_of(blocks: &[PromptBlock]) -> Vec<UserPart> {
    let mut parts = Vec::new();
    let mut text: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            PromptBlock::Image {
                mime_type, data, ..
            } => {
                if !text.is_empty() {
                    parts.push(UserPart::Text(text.join("\n")));
                    text.clear();
                }
                parts.push(UserPart::Image {
                    mime_type: mime_type.clone(),
                    data: data.clone(),
                });
            }
            other => text.push(block_text(other)),
        }
    }
    if !text.is_empty() {
        parts.push(UserPart::Text(text.join("\n")));
    }
    parts
}

/// Whether any block is an image.
pub fn has_image(blocks: &[PromptBlock]) -> bool {
    blocks
        .iter()
        .any(|b| matches!(b, PromptBlock::Image { .. }))
}

/// The blocks worth keeping beside the text in the log: none when the prompt is one
/// text block (its text is the prompt), else all of them.
pub fn blocks_to_log(blocks: &[PromptBlock]) -> Vec<PromptBlock> {
    match blocks {
        [PromptBlock::Text { .. }] => Vec::new(),
        _ => blocks.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> PromptBlock {
        PromptBlock::Text { text: t.into() }
    }

    fn image() -> PromptBlock {
        PromptBlock::Image {
            mime_type: "image/png".into(),
            data: "iVBO".into(),
            uri: None,
        }
    }

    #[test]
    fn resources_are_inlined_links_and_images_named() {
        let blocks = [
            text("look at"),
            PromptBlock::ResourceLink {
                uri: "file:///w/a.rs".into(),
                name: "a.rs".into(),
                title: None,
                description: None,
                mime_type: None,
                size: None,
            },
            PromptBlock::Resource {
                uri: "file:///w/b.rs".into(),
                mime_type: None,
                text: Some("fn b() {}".into()),
                blob: None,
            },
            PromptBlock::Resource {
                uri: "file:///w/c.bin".into(),
                mime_type: None,
                text: None,
                blob: Some("AAAA".into()),
            },
            image(),
        ];
        assert_eq!(
            text_of(&blocks),
            "look at\n[resource: file:///w/a.rs]\n<resource uri=\"file:///w/b.rs\">\nfn b() {}\n\
             </resource>\n[binary resource]\n[image: image/png]"
        );
    }

    #[test]
    fn images_split_the_text_into_parts_in_order() {
        let parts = parts_of(&[text("a"), text("b"), image(), text("c")]);
        assert_eq!(
            parts,
            [
                UserPart::Text("a\nb".into()),
                UserPart::Image {
                    mime_type: "image/png".into(),
                    data: "iVBO".into()
                },
                UserPart::Text("c".into()),
            ]
        );
        assert!(has_image(&[text("a"), image()]) && !has_image(&[text("a")]));
    }

    #[test]
    fn a_lone_text_block_is_not_logged_twice() {
        assert!(blocks_to_log(&[text("hi")]).is_empty());
        assert_eq!(blocks_to_log(&[text("a"), text("b")]).len(), 2);
        assert_eq!(blocks_to_log(&[image()]).len(), 1);
    }
}
