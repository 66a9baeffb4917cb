"""What `debugger collect` writes on each node and how a bundle's collected files find their node: layout.py defines
the layout once (the collector in agent/collect imports it), manifests.py reads collect.json, attribute.py names the
node of a collected file (manifest host, folder or file name, the file's own lines)."""
