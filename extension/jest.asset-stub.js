// Stands in for the .svg and .css files JupyterLab's UI packages import:
// icons need a non-empty SVG string, styles are irrelevant in jsdom.
module.exports = '<svg xmlns="http://www.w3.org/2000/svg"></svg>';
