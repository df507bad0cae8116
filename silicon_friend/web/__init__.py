"""The SiliconFriend web app (Gradio): :func:`silicon_friend.web.app.build_app` and
:func:`silicon_friend.web.server.serve`. Gradio is imported only when the app is built."""
